# The daemon's clients: the HTTP client library (kernelskill submit/status/…, tests,
# benchmarks) and the dashboard page the server embeds. Neither needs CAF or LibTorch.
add_library(ks_api_client STATIC ${CMAKE_CURRENT_LIST_DIR}/api_client.cpp)
target_link_libraries(ks_api_client
  PUBLIC ks_includes nlohmann_json::nlohmann_json
  PRIVATE PkgConfig::HTTPLIB)

set(_ks_dashboard_cpp "${CMAKE_CURRENT_BINARY_DIR}/dashboard_page.cpp")
add_custom_command(
  OUTPUT "${_ks_dashboard_cpp}"
  COMMAND "${CMAKE_COMMAND}"
    -DINPUT=${CMAKE_CURRENT_LIST_DIR}/dashboard/index.html
    -DOUTPUT=${_ks_dashboard_cpp}
    -DHEADER=daemon/dashboard.hpp -DNAMESPACE=ks -DFUNCTION=dashboard_page
    -P "${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake"
  DEPENDS "${CMAKE_CURRENT_LIST_DIR}/dashboard/index.html" "${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake"
  COMMENT "Embedding the dashboard page")
add_library(ks_dashboard STATIC "${_ks_dashboard_cpp}")
target_link_libraries(ks_dashboard PUBLIC ks_includes)
