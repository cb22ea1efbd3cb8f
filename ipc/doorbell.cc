#include "ipc/doorbell.h"

#include <climits>

namespace hugepin {

void Doorbell::wake(Os& os) {
  word.fetch_add(1, std::memory_order_release);  // release: pairs with the acquire load in wait()
  os.futex_wake(&word, INT_MAX);
}

}  // namespace hugepin
