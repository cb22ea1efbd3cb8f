// disk_uring_test: the disk tier's cases that need io_uring with O_DIRECT and fixed buffers. Skips
// (77), naming what is missing, where the kernel refuses io_uring (a seccomp profile), the disk
// has no O_DIRECT, or the process may not lock 16 MiB.
#include "base/size.h"
#include "disk/test_disk.h"
#include "tests/support/gate.h"

int main(int argc, char** argv) {
  using namespace hugepin;
  return test::run_or_skip(argc, argv,
                           {test::missing_io_uring(), test::missing_direct_io(), test::missing_locked_memory(16 * kMiB)});
}
