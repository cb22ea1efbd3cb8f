// disk_direct_test: the disk tier's cases that need O_DIRECT on this machine's disk. Skips (77),
// saying so, where files there do not open with O_DIRECT.
#include "disk/test_disk.h"
#include "tests/support/gate.h"

int main(int argc, char** argv) { return hugepin::test::run_or_skip(argc, argv, hugepin::test::missing_direct_io()); }
