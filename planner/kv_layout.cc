#include "planner/kv_layout.h"

#include <map>

#include "base/contract.h"
#include "base/error.h"
#include "planner/checked_math.h"

namespace hugepin::planner {
namespace {

// "[2, 4096, 16]", at most 16 entries shown.
std::string list_text(const std::vector<uint64_t>& values) {
  constexpr size_t kShown = 16;
  std::string text = "[";
  for (size_t i = 0; i < values.size() && i < kShown; ++i) text += cat(i == 0 ? "" : ", ", values[i]);
  if (values.size() > kShown) text += cat(", ... (", values.size(), " entries)");
  return text + "]";
}

[[noreturn]] void reject_strides(const TensorDescriptor& tensor, std::string_view where, std::string_view why) {
  throw Error(cat(where, ".strides = ", list_text(tensor.strides), ": ", why, " (shape ", list_text(tensor.shape),
                  ", element_size ", tensor.element_size, ")"));
}

uint64_t byte_stride(const TensorDescriptor& tensor, size_t dim, std::string_view where) {
  return checked_mul(tensor.strides[dim], tensor.element_size, cat(where, ".strides[", dim, "] * element_size"));
}

// The dimensions whose byte stride exceeds the page: the worker's outer (segment) dimensions.
std::vector<size_t> outer_dims(const TensorDescriptor& tensor, uint64_t page_bytes, std::string_view where) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < tensor.shape.size(); ++d) {
    if (byte_stride(tensor, d, where) > page_bytes) dims.push_back(d);
  }
  return dims;
}

// The first dimension other than `outer` of size num_blocks whose byte stride is the segment's
// bytes per block (any stride when num_blocks is 1: PyTorch leaves strides of size-1 dimensions
// free). -1 when there is none.
int block_dim(const TensorDescriptor& tensor, int outer, uint64_t num_blocks, uint64_t bytes_per_block,
              std::string_view where) {
  for (size_t d = 0; d < tensor.shape.size(); ++d) {
    if (static_cast<int>(d) == outer || tensor.shape[d] != num_blocks) continue;
    if (num_blocks == 1 || byte_stride(tensor, d, where) == bytes_per_block) return static_cast<int>(d);
  }
  return -1;
}

// Bytes one block of one segment spans: everything but the outer and the block dimension.
uint64_t block_span(const TensorDescriptor& tensor, int outer, int block, std::string_view where) {
  uint64_t last = 0;
  for (size_t d = 0; d < tensor.shape.size(); ++d) {
    if (static_cast<int>(d) == outer || static_cast<int>(d) == block) continue;
    last = checked_add(last, checked_mul(tensor.shape[d] - 1, byte_stride(tensor, d, where), cat(where, ".shape")),
                       cat(where, " extent"));
  }
  return checked_add(last, tensor.element_size, cat(where, " extent"));
}

// split_storage's contract: `tensor` passes tensor_extent_bytes and its extent fits the storage.
bool extent_fits(const TensorDescriptor& tensor, uint64_t storage_bytes) {
  try {
    return tensor_extent_bytes(tensor, tensor.name) <= storage_bytes;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

uint64_t tensor_extent_bytes(const TensorDescriptor& tensor, std::string_view where) {
  if (tensor.element_size == 0) throw Error(cat(where, ".element_size = 0: must be at least 1"));
  if (tensor.strides.size() != tensor.shape.size()) {
    throw Error(cat(where, ".strides = ", list_text(tensor.strides), ": has ", tensor.strides.size(),
                    " entries, shape ", list_text(tensor.shape), " has ", tensor.shape.size()));
  }
  uint64_t last = 0;
  for (size_t d = 0; d < tensor.shape.size(); ++d) {
    if (tensor.shape[d] == 0) {
      throw Error(cat(where, ".shape = ", list_text(tensor.shape), ": dimension ", d, " is 0 (a KV tensor holds data)"));
    }
    uint64_t span = checked_mul(tensor.shape[d] - 1, byte_stride(tensor, d, where), cat(where, ".shape[", d, "] extent"));
    last = checked_add(last, span, cat(where, " extent"));
  }
  return checked_add(last, tensor.element_size, cat(where, " extent"));
}

StorageLayout split_storage(const TensorDescriptor& tensor, uint64_t storage_bytes, uint64_t num_blocks,
                            std::string_view where) {
  HUGEPIN_REQUIRE(extent_fits(tensor, storage_bytes), where, ": storage_bytes ", storage_bytes);
  if (num_blocks == 0) throw Error(cat(where, ": num_blocks is 0 (a KV cache holds at least one block)"));
  StorageLayout layout;
  layout.storage = tensor.storage;
  layout.tensor = tensor.name;
  layout.group = tensor.group;
  layout.storage_bytes = storage_bytes;
  if (storage_bytes % num_blocks != 0) {
    throw Error(cat(where, ".storage_bytes = ", storage_bytes, ": storage '", tensor.storage,
                    "' is not a whole number of blocks (num_blocks ", num_blocks, ")"));
  }
  layout.page_bytes = storage_bytes / num_blocks;

  std::vector<size_t> outer = outer_dims(tensor, layout.page_bytes, where);
  if (outer.size() > 1) {
    reject_strides(tensor, where, cat("dimensions ", outer[0], " and ", outer[1], " both stride past one block (",
                                      layout.page_bytes, " bytes): only one outer K/V dimension can be split"));
  }
  if (outer.empty()) {
    layout.segment_bytes_per_block = layout.page_bytes;
  } else {
    layout.outer_dim = static_cast<int>(outer[0]);
    uint64_t segment_stride = byte_stride(tensor, outer[0], where);
    if (segment_stride % num_blocks != 0) {
      reject_strides(tensor, where, cat("the segment stride of dimension ", outer[0], " (", segment_stride,
                                        " bytes) is not a whole number of blocks (num_blocks ", num_blocks, ")"));
    }
    layout.segments = tensor.shape[outer[0]];
    layout.segment_bytes_per_block = segment_stride / num_blocks;
    uint64_t segments_bytes = checked_mul(layout.segments, segment_stride, cat(where, " segments"));
    if (segments_bytes > storage_bytes) {
      reject_strides(tensor, where, cat(layout.segments, " segments of ", segment_stride, " bytes overrun storage '",
                                        tensor.storage, "' of ", storage_bytes, " bytes"));
    }
  }

  int block = block_dim(tensor, layout.outer_dim, num_blocks, layout.segment_bytes_per_block, where);
  if (block < 0) {
    reject_strides(tensor, where, cat("no dimension of size num_blocks ", num_blocks, " strides by ",
                                      layout.segment_bytes_per_block,
                                      " bytes (one block of a segment): not a block-major layout"));
  }
  uint64_t span = block_span(tensor, layout.outer_dim, block, where);
  if (span > layout.segment_bytes_per_block) {
    reject_strides(tensor, where, cat("one block spans ", span, " bytes, more than its ", layout.segment_bytes_per_block,
                                      "-byte slot: blocks would overlap"));
  }
  layout.bytes_per_block = checked_mul(layout.segments, layout.segment_bytes_per_block, cat(where, " bytes per block"));
  return layout;
}

RankLayout rank_layout(const std::vector<TensorDescriptor>& tensors, uint64_t num_blocks, std::string_view where) {
  if (tensors.empty()) throw Error(cat(where, ".tensors = []: a rank without KV tensors"));

  // Pass 1: every tensor is well formed; each storage's size is declared alike or defaults to
  // the largest extent naming it.
  struct StorageSize {
    size_t first = 0;                 // index of the first tensor naming the storage
    std::optional<size_t> declared_by;
    uint64_t bytes = 0;
  };
  std::map<std::string, StorageSize> sizes;
  std::vector<std::string> order;
  std::vector<uint64_t> extents;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string path = cat(where, ".tensors[", i, "]");
    const TensorDescriptor& tensor = tensors[i];
    uint64_t extent = tensor_extent_bytes(tensor, path);
    extents.push_back(extent);
    auto [it, inserted] = sizes.try_emplace(tensor.storage, StorageSize{i, std::nullopt, 0});
    if (inserted) order.push_back(tensor.storage);
    StorageSize& size = it->second;
    if (tensor.storage_bytes) {
      if (size.declared_by && size.bytes != *tensor.storage_bytes) {
        throw Error(cat(path, ".storage_bytes = ", *tensor.storage_bytes, ": ", where, ".tensors[", *size.declared_by,
                        "] gives ", size.bytes, " for the same storage '", tensor.storage, "'"));
      }
      size.declared_by = i;
      size.bytes = *tensor.storage_bytes;
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    StorageSize& size = sizes[tensors[i].storage];
    if (!size.declared_by && extents[i] > size.bytes) size.bytes = extents[i];
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const StorageSize& size = sizes[tensors[i].storage];
    if (extents[i] > size.bytes) {
      throw Error(cat(where, ".tensors[", i, "].storage_bytes = ", size.bytes, ": tensor '", tensors[i].name,
                      "' addresses ", extents[i], " bytes, past the end of storage '", tensors[i].storage, "'"));
    }
  }

  // Pass 2: split each storage once, through its first tensor.
  RankLayout layout;
  for (const std::string& storage : order) {
    const StorageSize& size = sizes[storage];
    StorageLayout split =
        split_storage(tensors[size.first], size.bytes, num_blocks, cat(where, ".tensors[", size.first, "]"));
    split.tensor_index = size.first;
    layout.bytes_per_block = checked_add(layout.bytes_per_block, split.bytes_per_block, cat(where, " payload per block"));
    layout.storages.push_back(std::move(split));
  }
  return layout;
}

}  // namespace hugepin::planner
