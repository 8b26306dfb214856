# Tests of libraftlock that need no server (cmocka). Included from
# tests/unit/CMakeLists.txt:
#   include(${PROJECT_SOURCE_DIR}/client/tests.cmake)
# Works whether or not that file already made a target per test_*.c: an
# existing target gets what a client test needs, a missing one is made.
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)

# Every tests/unit/test_client_*.c, found by the same glob as the other
# unit tests, so that a new one is never silently left out.
file(GLOB _client_tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/unit/test_client_*.c)
foreach(_src ${_client_tests})
  get_filename_component(_name ${_src} NAME_WE)
  if(NOT TARGET ${_name})
    add_executable(${_name} ${_src})
    target_link_libraries(${_name} PRIVATE PkgConfig::CMOCKA)
    add_test(NAME unit_${_name} COMMAND ${_name})
    set_tests_properties(unit_${_name} PROPERTIES LABELS unit TIMEOUT 120)
  endif()
  # Internal headers (session.h, conn.h) and the proto codec are reachable
  # through the static library, which holds every object.
  target_include_directories(${_name} PRIVATE
    ${PROJECT_SOURCE_DIR}/client
    $<TARGET_PROPERTY:raftlock_proto,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(${_name} PRIVATE
    raftlock_static PkgConfig::PROTOBUFC Threads::Threads)
  add_dependencies(${_name} raftlock_proto)
  # The fake node (not a test of its own: its name does not start with
  # test_) goes into the tests that include its header.
  file(STRINGS ${_src} _uses_fake REGEX "#include \"client_fakeserver.h\"")
  if(_uses_fake)
    target_sources(${_name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/unit/client_fakeserver.c)
  endif()
endforeach()
target_compile_definitions(test_client_cli PRIVATE
  RAFTLOCK_CLI_PATH="$<TARGET_FILE:raftlock_cli>" RAFTLOCK_PYTHON="${RAFTLOCK_PYTHON}")
add_dependencies(test_client_cli raftlock_cli)
# The CLI's JSON strings, tested alone (the CLI's other files are not in
# the library).
target_sources(test_client_cli_json PRIVATE ${PROJECT_SOURCE_DIR}/client/cli_json.c)

# Only raftlock_* symbols may leave libraftlock.so (STYLE.md, practice 1),
# and every function of the header must.
add_test(NAME unit_client_exports COMMAND sh -c
  "syms=$(nm -D --defined-only \"$1\" | awk '{print $3}') || exit 1; \
   bad=$(printf '%s\\n' \"$syms\" | grep -v '^raftlock_'); \
   [ -z \"$bad\" ] || { echo \"exported: $bad\"; exit 1; }; \
   for f in $(grep -o 'RAFTLOCK_API [^(]*(' \"$2\" | grep -o 'raftlock_[a-z_]*('); do \
     printf '%s\\n' \"$syms\" | grep -qx \"\${f%(}\" || { echo \"missing: $f\"; exit 1; }; \
   done"
  sh $<TARGET_FILE:raftlock_shared> ${PROJECT_SOURCE_DIR}/client/raftlock.h)
set_tests_properties(unit_client_exports PROPERTIES LABELS unit)
# The out-of-memory test fails chosen allocations (tests/unit/alloc_fail.h):
# --wrap sends the calls of every object linked into it (libraftlock's
# static objects too) to its wrappers. Under RAFTLOCK_SANITIZE the real
# functions are ASan's, which it intercepts: the test runs there too.
target_sources(test_client_oom PRIVATE ${PROJECT_SOURCE_DIR}/tests/unit/alloc_fail.c)
target_link_options(test_client_oom PRIVATE
  "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup")
# The TLS test makes its certificates with deploy/make-certs.
target_compile_definitions(test_client_conn_tls PRIVATE RAFTLOCK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# The struct-size test reads client/raftlock.h back.
target_compile_definitions(test_client_struct_size PRIVATE RAFTLOCK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
