# Writes a C++ source that defines `std::string_view NAMESPACE::FUNCTION()` returning the
# bytes of INPUT, so that a file (the dashboard page) ships inside the binary and the
# daemon serves it with no path to find at run time.
#   cmake -DINPUT=in -DOUTPUT=out.cpp -DHEADER=dir/x.hpp -DNAMESPACE=ks -DFUNCTION=f -P embed_file.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
# Lines of 16 bytes keep the generated file readable in a diff or a debugger.
string(REGEX REPLACE "(('[^']*',){16})" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT} by cmake/embed_file.cmake; edit the input, not this file.\n"
"#include \"${HEADER}\"\n\n"
"namespace ${NAMESPACE} {\n"
"namespace {\n"
"const char embedded_bytes[] = {\n    ${bytes}'\\0'};\n"
"}  // namespace\n\n"
"std::string_view ${FUNCTION}() { return {embedded_bytes, sizeof(embedded_bytes) - 1}; }\n\n"
"}  // namespace ${NAMESPACE}\n")
# Only touch the output when it changed, so that an unrelated reconfigure does not
# recompile and relink the daemon.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
