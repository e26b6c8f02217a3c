#pragma once
// One field list per struct. Every struct of the model writes its fields once, in
// order, in a visit_fields() overload next to it:
//
//   template <class F>
//   auto visit_fields(tolerance_spec& x, F&& f) {
//     return f("tolerance_spec", KS_FIELD(atol), KS_FIELD(rtol));
//   }
//
// f receives the struct's name and one field_ref per field (its C++ name and a
// reference to it). Two readers serve everything: protocol/protocol.hpp turns the list
// into CAF's inspect() (the wire format: fields in this order), and model/json_codec
// turns it into JSON (fields under their names). A field added to the struct and to
// its list travels in both; a field left out of the list travels in neither, which the
// round-trip tests catch (they set every field).

#include <type_traits>

namespace ks {

// A field by name. How a codec writes it follows from its type alone (shared_bytes,
// for instance, is base64 in JSON).
template <class T>
struct field_ref {
  const char* name;
  T& value;
};

template <class T>
field_ref<T> field(const char* name, T& value) {
  return field_ref<T>{name, value};
}

// Inside a visit_fields overload whose struct parameter is named x.
#define KS_FIELD(member) ::ks::field(#member, x.member)

namespace detail {
struct field_probe {
  template <class... Fields>
  int operator()(const char*, Fields&&...) const {
    return 0;
  }
};
}  // namespace detail

// A struct of the model: it has a visit_fields() list.
template <class T>
concept has_field_list = requires(T& x) {
  visit_fields(x, detail::field_probe{});
};

}  // namespace ks
