# Tests of libraftlock that need no server (cmocka). Included from
# tests/unit/CMakeLists.txt:
#   include(${PROJECT_SOURCE_DIR}/client/tests.cmake)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)

foreach(_t errors options validity fake)
  add_executable(test_client_${_t}
    ${PROJECT_SOURCE_DIR}/tests/unit/test_client_${_t}.c)
  # Internal headers (session.h, conn.h) and the proto codec are reachable
  # through the static library, which holds every object.
  target_include_directories(test_client_${_t} PRIVATE
    ${PROJECT_SOURCE_DIR}/client
    $<TARGET_PROPERTY:raftlock_proto,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(test_client_${_t} PRIVATE
    raftlock_static PkgConfig::CMOCKA PkgConfig::PROTOBUFC Threads::Threads)
  add_dependencies(test_client_${_t} raftlock_proto)
  add_test(NAME client_${_t} COMMAND test_client_${_t})
  set_tests_properties(client_${_t} PROPERTIES TIMEOUT 120)
endforeach()
