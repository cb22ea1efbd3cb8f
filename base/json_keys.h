// Duplicate keys in JSON text: nlohmann keeps the last value of a key given twice, silently. A
// plan or a daemon request that names a field twice means one of the two by accident, so both
// refuse it, naming the key.
//
// Header-only (nlohmann's SAX parser): include it only where nlohmann_json is linked.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace hugepin {
namespace detail {

// Walks the text, keeping the keys of each object open on the way; stops at the first key an
// object already has, and remembers its path ("ranks[1].tp_rank").
class DuplicateKeyFinder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string found;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    value();
    frames_.push_back({true, {}, {}, 0});
    return true;
  }
  bool key(string_t& name) override {
    Frame& frame = frames_.back();
    frame.key = name;
    if (frame.keys.insert(name).second) return true;
    found = path();
    return false;  // stops the parse
  }
  bool end_object() override {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    value();
    frames_.push_back({false, {}, {}, 0});
    return true;
  }
  bool end_array() override {
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;    // the object's key being read
    size_t elements;    // the array's elements so far
  };

  bool value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().elements;
    return true;
  }

  std::string path() const {
    // Appended piece by piece: GCC 12 at -O3 warned (-Wrestrict, a false positive of its own) on
    // the `"." + key` temporaries this was built from.
    std::string text;
    for (const Frame& frame : frames_) {
      if (frame.object) {
        if (!text.empty()) text += '.';
        text += frame.key;
      } else {
        text += '[';
        text += std::to_string(frame.elements - 1);
        text += ']';
      }
    }
    return text;
  }

  std::vector<Frame> frames_;
};

}  // namespace detail

// The path of the first key that an object of `text` gives twice ("ranks[1].tp_rank"); "" when
// none does, or the text is not JSON (the caller's parse reports that).
inline std::string first_duplicate_key(std::string_view text) {
  detail::DuplicateKeyFinder finder;
  nlohmann::json::sax_parse(text, &finder);
  return finder.found;
}

}  // namespace hugepin
