// For the planner's tests: KV tensors as attention backends register them (contiguous layouts
// built from their shapes, so each test states only what it varies), the host they plan on
// (planner/test_host.h), and error capture.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "planner/kv_layout.h"
#include "planner/test_host.h"

namespace hugepin::planner::test {

// Row-major strides (in elements) of `shape`.
inline std::vector<uint64_t> contiguous_strides(const std::vector<uint64_t>& shape) {
  std::vector<uint64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

inline TensorDescriptor contiguous(std::string name, std::string storage, std::vector<uint64_t> shape,
                                   uint64_t element_size, uint32_t group = 0) {
  TensorDescriptor tensor;
  tensor.name = std::move(name);
  tensor.storage = std::move(storage);
  tensor.strides = contiguous_strides(shape);
  tensor.shape = std::move(shape);
  tensor.element_size = element_size;
  tensor.group = group;
  return tensor;
}

// FlashAttention / ROCm: (2, num_blocks, block_size, heads, head_dim), K/V outermost.
inline TensorDescriptor kv_outer(std::string name, std::string storage, uint64_t num_blocks, uint64_t block_size,
                                 uint64_t heads, uint64_t head_dim, uint64_t element_size, uint32_t group = 0) {
  return contiguous(std::move(name), std::move(storage), {2, num_blocks, block_size, heads, head_dim}, element_size,
                    group);
}

// FlashInfer: (num_blocks, 2, block_size, heads, head_dim), blocks outermost.
inline TensorDescriptor blocks_outer(std::string name, std::string storage, uint64_t num_blocks, uint64_t block_size,
                                     uint64_t heads, uint64_t head_dim, uint64_t element_size, uint32_t group = 0) {
  return contiguous(std::move(name), std::move(storage), {num_blocks, 2, block_size, heads, head_dim}, element_size,
                    group);
}

// A recurrent-state tensor (Mamba conv or SSM state): (num_blocks, dims...) inside pages of
// `page_bytes` (padded: the block stride is the page, the state may be smaller), in a storage
// of num_blocks pages.
inline TensorDescriptor state(std::string name, std::string storage, uint64_t num_blocks, std::vector<uint64_t> dims,
                              uint64_t page_bytes, uint64_t element_size, uint32_t group) {
  std::vector<uint64_t> shape{num_blocks};
  shape.insert(shape.end(), dims.begin(), dims.end());
  TensorDescriptor tensor = contiguous(std::move(name), std::move(storage), std::move(shape), element_size, group);
  tensor.strides[0] = page_bytes / element_size;
  tensor.storage_bytes = num_blocks * page_bytes;
  return tensor;
}

// The message of the hugepin::Error `call` throws; "" when it throws none; any other exception
// is marked as such (the planner throws nothing else).
template <typename Call>
std::string error_message(Call call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  } catch (const std::exception& error) {
    return std::string("not a hugepin::Error: ") + error.what();
  }
  return "";
}

}  // namespace hugepin::planner::test

// Checks that `expr` throws a hugepin::Error whose one-line message contains `part`.
#define CHECK_REJECTS(expr, part)                                                                   \
  do {                                                                                              \
    std::string message_ = ::hugepin::planner::test::error_message([&] { (void)(expr); });          \
    CHECK_MESSAGE((message_.find(part) != std::string::npos && message_.find('\n') == std::string::npos), \
                  ("error \"" + message_ + "\" lacks \"" + std::string(part) + "\""));             \
  } while (0)
