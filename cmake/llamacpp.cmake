# llama.cpp as the reference of the GGUF tests (tools/llamacpp): when
# node-llama-cpp is installed there (tools/install-deps.sh), llama_driver is
# built against the headers of its source bundle (extracted by
# tools/llamacpp/headers.sh) and its prebuilt libllama and ggml. The tests
# tests/llamacpp_*.sh are registered either way and skip (exit 77, with the
# reason) when the driver is absent.
set(DA_LLAMACPP_MODULES ${CMAKE_SOURCE_DIR}/tools/llamacpp/node_modules)
set(DA_LLAMACPP_LIBDIR ${DA_LLAMACPP_MODULES}/@node-llama-cpp/linux-x64/bins/linux-x64)
set(DA_LLAMACPP_BUNDLE ${DA_LLAMACPP_MODULES}/node-llama-cpp/llama/gitRelease.bundle)
file(GLOB DA_LLAMACPP_LIBS ${DA_LLAMACPP_LIBDIR}/libllama.*so ${DA_LLAMACPP_LIBDIR}/libggml.*so
     ${DA_LLAMACPP_LIBDIR}/libggml-base.so)
set(DA_LLAMA_DRIVER none)
if(EXISTS ${DA_LLAMACPP_BUNDLE} AND DA_LLAMACPP_LIBS AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(hdr ${CMAKE_BINARY_DIR}/llamacpp-include)
  if(NOT EXISTS ${hdr}/include/llama.h OR ${DA_LLAMACPP_BUNDLE} IS_NEWER_THAN ${hdr}/include/llama.h)
    execute_process(COMMAND bash ${CMAKE_SOURCE_DIR}/tools/llamacpp/headers.sh ${DA_LLAMACPP_BUNDLE} ${hdr}
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(WARNING "llama.cpp: cannot extract the headers from ${DA_LLAMACPP_BUNDLE}; its tests will skip")
    endif()
  endif()
  if(EXISTS ${hdr}/include/llama.h)
    add_executable(llama_driver tools/llamacpp/llama_driver.c)
    target_include_directories(llama_driver SYSTEM PRIVATE ${hdr}/include ${hdr}/ggml/include)
    target_compile_definitions(llama_driver PRIVATE LLAMACPP_LIB_DIR="${DA_LLAMACPP_LIBDIR}")
    target_link_libraries(llama_driver PRIVATE ${DA_LLAMACPP_LIBS} m)
    set_target_properties(llama_driver PROPERTIES BUILD_RPATH ${DA_LLAMACPP_LIBDIR})
    # not ours to sanitize: the driver is built without the ASan flags of a DA_SANITIZE build
    set_property(TARGET llama_driver PROPERTY COMPILE_OPTIONS -Wall -Wextra -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE)
    set_property(TARGET llama_driver PROPERTY LINK_OPTIONS "")
    set(DA_LLAMA_DRIVER $<TARGET_FILE:llama_driver>)
    message(STATUS "llama.cpp: llama_driver against ${DA_LLAMACPP_LIBDIR}")
  endif()
else()
  message(STATUS "llama.cpp: node-llama-cpp not installed in tools/llamacpp (tools/install-deps.sh); its tests will skip")
endif()
file(GLOB DA_LLAMACPP_TESTS CONFIGURE_DEPENDS tests/llamacpp_*.sh)
foreach(src ${DA_LLAMACPP_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_test(NAME ${name} COMMAND bash ${src} $<TARGET_FILE:diffattn_cli> ${DA_LLAMA_DRIVER}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77
                       ENVIRONMENT "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
endforeach()
