// The CUDA side of a shim allocation: registering the memory the shim maps, through the real
// entry points of the runtime (cudaHostRegister) or of the driver (cuMemHostRegister), whichever
// API the caller used. Implementations live beside the interposed functions (interpose.cc);
// tests substitute their own.
#pragma once

#include <cstdint>
#include <string>

#include "shim/table_layout.h"

namespace hugepin {

class PinApi {
 public:
  virtual ~PinApi() = default;

  virtual shim_table::Api kind() const = 0;
  // Page-locks [address, address + bytes) and maps it for every context (Portable | Mapped):
  // what cudaHostAlloc memory is under unified addressing, whatever flags it was asked with.
  // Returns 0 or the API's error code.
  virtual int register_memory(void* address, uint64_t bytes) = 0;
  virtual int unregister_memory(void* address) = 0;
  // The PCI address of the GPU of the current device (runtime) or context (driver), or the
  // API's error code.
  virtual int current_gpu(std::string* pci_address) = 0;
  // "cudaHostRegister failed: 712 (part or all of the requested memory range is already mapped)".
  virtual std::string describe(const char* call, int code) = 0;
  // Clears what a failed call of the shim's own left behind (the runtime's last error), so that
  // the application's next cudaGetLastError does not see it.
  virtual void clear_error() = 0;
  // The code the API returns for a range that is not registered, which unregistering a shim
  // allocation must not be mistaken for.
  virtual int not_registered_code() const = 0;
};

}  // namespace hugepin
