#include "daemon/metrics_file.h"

#include <fcntl.h>

#include "base/error.h"
#include "base/trusted_file.h"

namespace hugepin::daemon {
namespace {

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += cat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void sample(std::string& out, std::string_view name, uint64_t value, std::string_view labels = "") {
  out += cat(name, labels.empty() ? "" : cat("{", labels, "}"), " ", value, "\n");
}

}  // namespace

std::string daemon_metrics_text(const DaemonFigures& f) {
  std::string out;
  family(out, "hugepind_up", "gauge", "1 while hugepind runs; 0 in the file it leaves when it stops.");
  sample(out, "hugepind_up", f.up ? 1 : 0);
  family(out, "hugepind_start_time_seconds", "gauge", "When this hugepind started (Unix time).");
  sample(out, "hugepind_start_time_seconds", static_cast<uint64_t>(f.started_realtime_ns / 1'000'000'000));
  family(out, "hugepind_requests_total", "counter", "Requests answered on the socket, by result.");
  sample(out, "hugepind_requests_total", f.requests_ok, "result=\"ok\"");
  sample(out, "hugepind_requests_total", f.requests_failed, "result=\"error\"");
  sample(out, "hugepind_requests_total", f.requests_refused, "result=\"refused\"");
  family(out, "hugepind_connections", "gauge", "Client connections open now.");
  sample(out, "hugepind_connections", f.connections);
  family(out, "hugepind_arenas", "gauge", "Arenas hugepind manages, by whether a live worker, scheduler, creator or region lock owns them.");
  sample(out, "hugepind_arenas", f.arenas_owned, "owned=\"true\"");
  sample(out, "hugepind_arenas", f.arenas - f.arenas_owned, "owned=\"false\"");
  family(out, "hugepind_quarantined_arenas", "gauge", "Inconsistent arenas moved to quarantine and not yet removed by hand.");
  sample(out, "hugepind_quarantined_arenas", f.quarantined);
  family(out, "hugepind_stale_arenas", "gauge", "Arena files that belong to no usable arena (hugepin arena list --stale).");
  sample(out, "hugepind_stale_arenas", f.stale);
  family(out, "hugepind_ranks_marked_dead_total", "counter", "Ranks the reaper marked dead because their worker was gone.");
  sample(out, "hugepind_ranks_marked_dead_total", f.ranks_marked_dead);
  family(out, "hugepind_arenas_expired_total", "counter", "Arenas destroyed after HUGEPIN_RETENTION without an owner.");
  sample(out, "hugepind_arenas_expired_total", f.arenas_expired);
  family(out, "hugepind_stale_removed_total", "counter", "Stale arenas whose files were removed.");
  sample(out, "hugepind_stale_removed_total", f.stale_removed);
  return out;
}

void write_metrics_file(Os& os, const std::string& dir, std::string_view text) {
  const std::string path = cat(dir, "/", kMetricsFileName);
  const std::string temporary = path + ".tmp";
  // A new file, never one found there: the textfile directory may be shared, and a link planted
  // at the temporary name must not make hugepind truncate what it points to.
  os.unlink(temporary);
  const int fd = open_trusted(os, user_named(temporary), O_WRONLY | O_CREAT | O_EXCL,
                              {FileType::kRegular, FileOwners::kTrusted, "metrics file"}, 0644)
                     .fd.release();
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = os.pwrite(fd, text.data() + done, text.size() - done, done);
    if (n <= 0) {
      os.close(fd);
      os.unlink(temporary);
      throw_errno(cat("cannot write metrics file ", temporary), n < 0 ? static_cast<int>(-n) : EIO);
    }
    done += static_cast<size_t>(n);
  }
  os.fchmod(fd, 0644);  // readable by node_exporter whatever the umask
  if (int rc = os.close(fd); rc < 0) throw_errno(cat("cannot write metrics file ", temporary), -rc);
  if (int rc = os.rename(temporary, path); rc < 0) throw_errno(cat("cannot rename ", temporary, " to ", path), -rc);
}

}  // namespace hugepin::daemon
