// From a rank's GPU KV tensors to its logical payload per block.
//
// A rank registers its KV cache as tensors (PyTorch metadata: shape, strides in elements,
// element size) over raw storages. Several tensors may share one storage (layers that alias, or
// the state tensors of one hybrid layer); a storage is copied once. Each storage is copied as
// one or more [num_blocks, bytes per block] views, its segments, split the way the offloading
// worker splits it:
//
//   page_bytes = storage_bytes / num_blocks
//   outer dimensions = those whose byte stride (stride * element_size) exceeds page_bytes
//   none:           one segment; bytes per block = page_bytes            (block-major layouts)
//   one, of size S: S segments of seg_stride = byte stride of that dimension each;
//                   bytes per block = seg_stride / num_blocks             (K/V-outermost layouts)
//
// The split is only accepted when it is a true block-major split: every segment holds a
// dimension of size num_blocks whose byte stride is the segment's bytes per block, the other
// dimensions of one block fit in those bytes, and the segments fit in the storage. Anything
// else (two outer dimensions, strides that interleave blocks, sizes that do not divide) is
// rejected, because copying it block by block would move the wrong bytes.
//
// Pure functions: data in, data out. Errors name the input path given as `where` ("ranks[3]"),
// e.g. "ranks[3].tensors[0].strides = [...]: ...".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hugepin::planner {

// One GPU KV tensor as the engine registers it.
struct TensorDescriptor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<uint64_t> strides;  // in elements, as torch.Tensor.stride()
  uint64_t element_size = 0;      // bytes per element
  std::string storage;            // storage id: tensors naming the same id share memory
  std::optional<uint64_t> storage_bytes;  // unset: the largest extent of the tensors naming it
  uint32_t group = 0;             // KV cache group index
};

// How one unique storage is copied: `segments` views of [num_blocks, segment_bytes_per_block].
struct StorageLayout {
  std::string storage;
  std::string tensor;         // the tensor that represents the storage: the first naming it
  size_t tensor_index = 0;    // its position in the rank's tensor list
  uint32_t group = 0;         // the representative tensor's group
  uint64_t storage_bytes = 0;
  uint64_t page_bytes = 0;    // storage_bytes / num_blocks
  int outer_dim = -1;         // the dimension split into segments; -1 when none
  uint64_t segments = 1;
  uint64_t segment_bytes_per_block = 0;
  uint64_t bytes_per_block = 0;  // segments * segment_bytes_per_block
};

// One rank's KV cache: its unique storages, in order of first appearance, and their sum.
struct RankLayout {
  std::vector<StorageLayout> storages;
  uint64_t bytes_per_block = 0;
};

// The highest byte a tensor addresses, plus one, counted from the start of its storage.
// Throws Error naming `where` (the tensor's path) when shape and strides differ in length, a
// dimension or the element size is 0, or the extent overflows 64 bits.
uint64_t tensor_extent_bytes(const TensorDescriptor& tensor, std::string_view where);

// The segments of one storage of `storage_bytes`, represented by `tensor`, per the rule above.
// REQUIRES: tensor passed tensor_extent_bytes, and its extent <= storage_bytes.
// Throws Error naming `where` (the tensor's path) and the value at fault when the split is not
// a block-major split (see above) or num_blocks is 0.
StorageLayout split_storage(const TensorDescriptor& tensor, uint64_t storage_bytes, uint64_t num_blocks,
                            std::string_view where);

// Deduplicates `tensors` by storage, splits each storage, sums the bytes per block.
// `where` is the rank's path ("ranks[3]"); tensor i is "<where>.tensors[i]".
// Throws Error naming the field when `tensors` is empty (a rank without KV tensors), a tensor is
// malformed or exceeds its storage, tensors sharing a storage disagree on storage_bytes, a split
// is rejected, or a sum overflows.
RankLayout rank_layout(const std::vector<TensorDescriptor>& tensors, uint64_t num_blocks, std::string_view where);

}  // namespace hugepin::planner
