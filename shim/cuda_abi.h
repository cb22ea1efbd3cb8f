// The few CUDA runtime and driver declarations the shim needs, declared here so that the shim
// (and the fake runtime its tests run against) builds on machines without CUDA. Values and
// signatures are those of CUDA 12 and 13 (cuda_runtime_api.h, driver_types.h, cuda.h); an enum
// return type and `int` have the same ABI on every platform CUDA supports.
//
// Not a public header: only shim/ and its tests include it.
#pragma once

#include <cstddef>

namespace hugepin::cuda {

// cudaError_t values.
inline constexpr int kSuccess = 0;
inline constexpr int kErrorInvalidValue = 1;
inline constexpr int kErrorMemoryAllocation = 2;
inline constexpr int kErrorInitializationError = 3;
inline constexpr int kErrorHostMemoryAlreadyRegistered = 712;
inline constexpr int kErrorHostMemoryNotRegistered = 713;

// cudaHostAlloc flags.
inline constexpr unsigned kHostAllocPortable = 0x01;
inline constexpr unsigned kHostAllocMapped = 0x02;
inline constexpr unsigned kHostAllocWriteCombined = 0x04;
inline constexpr unsigned kHostAllocKnownFlags = kHostAllocPortable | kHostAllocMapped | kHostAllocWriteCombined;

// cudaHostRegister flags.
inline constexpr unsigned kHostRegisterPortable = 0x01;
inline constexpr unsigned kHostRegisterMapped = 0x02;

// CUresult values and cuMemHostAlloc / cuMemHostRegister flags (the same bits as the runtime's).
inline constexpr int kDriverSuccess = 0;
inline constexpr int kDriverErrorInvalidValue = 1;
inline constexpr int kDriverErrorOutOfMemory = 2;
inline constexpr int kDriverErrorNotInitialized = 3;
inline constexpr int kDriverErrorHostMemoryAlreadyRegistered = 712;
inline constexpr int kDriverErrorHostMemoryNotRegistered = 713;
inline constexpr unsigned kMemHostAllocPortable = 0x01;
inline constexpr unsigned kMemHostAllocDeviceMap = 0x02;
inline constexpr unsigned kMemHostAllocWriteCombined = 0x04;
inline constexpr unsigned kMemHostRegisterPortable = 0x01;
inline constexpr unsigned kMemHostRegisterDeviceMap = 0x02;

}  // namespace hugepin::cuda

// Signatures, as the real libraries export them (cudaError_t and CUresult are enums there).
extern "C" {
// libcudart
using cudaHostAlloc_t = int (*)(void** ptr, size_t size, unsigned int flags);
using cudaMallocHost_t = int (*)(void** ptr, size_t size);
using cudaFreeHost_t = int (*)(void* ptr);
using cudaHostRegister_t = int (*)(void* ptr, size_t size, unsigned int flags);
using cudaHostUnregister_t = int (*)(void* ptr);
using cudaHostGetFlags_t = int (*)(unsigned int* flags, void* host);
using cudaHostGetDevicePointer_t = int (*)(void** device, void* host, unsigned int flags);
using cudaGetDevice_t = int (*)(int* device);
using cudaDeviceGetPCIBusId_t = int (*)(char* id, int length, int device);
using cudaGetLastError_t = int (*)();
using cudaPeekAtLastError_t = int (*)();
using cudaGetErrorString_t = const char* (*)(int error);
// libcuda (the _v2 names are what cuda.h binds cuMemAllocHost and cuMemHostRegister to)
using cuMemHostAlloc_t = int (*)(void** ptr, size_t size, unsigned int flags);
using cuMemAllocHost_v2_t = int (*)(void** ptr, size_t size);
using cuMemFreeHost_t = int (*)(void* ptr);
using cuMemHostRegister_v2_t = int (*)(void* ptr, size_t size, unsigned int flags);
using cuMemHostUnregister_t = int (*)(void* ptr);
using cuMemHostGetFlags_t = int (*)(unsigned int* flags, void* host);
using cuCtxGetDevice_t = int (*)(int* device);
using cuDeviceGetPCIBusId_t = int (*)(char* id, int length, int device);
}
