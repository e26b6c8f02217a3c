#pragma once
// The Python code of a saved TorchScript module, for a prompt: torch.jit.save writes a
// zip archive whose `ARCHIVE/code/__torch__*.py` records hold the module's code as
// TorchScript prints it (the classes, their forward and what it calls), stored
// uncompressed. Reading them needs no LibTorch: a minimal reader of the zip's central
// directory (zip64 included, as PyTorch writes it) returns those records.
//
// What it promises: the code records in archive order, each with its path inside the
// archive; records stored compressed (no torch version writes code so) and the
// debug pickles (*.debug_pkl) are skipped. An error when the bytes are no zip archive
// or its directory is malformed — never a read past the bytes.

#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ks {

struct module_code_file {
  std::string path;  // "swish_module/code/__torch__.py"
  std::string text;
};

result<std::vector<module_code_file>> module_code(std::string_view archive_bytes);

}  // namespace ks
