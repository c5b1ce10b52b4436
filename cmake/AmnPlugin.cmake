# amn_add_plugin(<name> SOURCES src... [AVX2_SOURCES src...] [AVX512_SOURCES src...]
#                [LIBS lib...])
# Builds amn-<name>.so, a module exporting one symbol, into the build tree's
# plugin directory, and installs it to ${libdir}/amn/plugins.
set(AMN_SIMD_AVX2_FLAGS -mavx2 -mf16c -mbmi2)
set(AMN_SIMD_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mf16c -mbmi2)

# x86 intrinsics sources exist only in x86-64 builds; elsewhere the scalar
# kernels are all there is (AMN_SIMD_X86 in amn/simd.h).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(AMN_SIMD_X86 ON)
else()
  set(AMN_SIMD_X86 OFF)
endif()

function(amn_simd_sources target)
  cmake_parse_arguments(S "" "" "AVX2;AVX512" ${ARGN})
  if(NOT AMN_SIMD_X86)
    return()
  endif()
  target_sources(${target} PRIVATE ${S_AVX2} ${S_AVX512})
  set_source_files_properties(${S_AVX2} TARGET_DIRECTORY ${target}
                              PROPERTIES COMPILE_OPTIONS "${AMN_SIMD_AVX2_FLAGS}")
  set_source_files_properties(${S_AVX512} TARGET_DIRECTORY ${target}
                              PROPERTIES COMPILE_OPTIONS "${AMN_SIMD_AVX512_FLAGS}")
endfunction()

function(amn_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;AVX2_SOURCES;AVX512_SOURCES;LIBS" ${ARGN})
  set(t amn-plugin-${name})
  if(AMN_STATIC_PLUGINS)
    # Built into libamn: the descriptor becomes amn_<name>_LTX_amn_plugin_v2
    # (AMN_PLUGIN_BUILTIN), listed in the table the top CMakeLists generates.
    add_library(${t} OBJECT ${P_SOURCES})
    amn_simd_sources(${t} AVX2 ${P_AVX2_SOURCES} AVX512 ${P_AVX512_SOURCES})
    set_target_properties(${t} PROPERTIES C_VISIBILITY_PRESET hidden)
    target_compile_definitions(${t} PRIVATE AMN_PLUGIN_BUILTIN)
    target_link_libraries(${t} PUBLIC amn-headers ${P_LIBS})
    target_link_libraries(amn PRIVATE ${t})
    set_property(GLOBAL APPEND PROPERTY AMN_BUILTIN_PLUGINS ${name})
    set_property(GLOBAL APPEND PROPERTY AMN_PLUGIN_TARGETS ${t})
    return()
  endif()
  add_library(${t} MODULE ${P_SOURCES})
  amn_simd_sources(${t} AVX2 ${P_AVX2_SOURCES} AVX512 ${P_AVX512_SOURCES})
  set_target_properties(${t} PROPERTIES
    OUTPUT_NAME amn-${name} PREFIX ""
    LIBRARY_OUTPUT_DIRECTORY ${AMN_PLUGIN_BUILD_DIR}
    C_VISIBILITY_PRESET hidden)
  target_link_libraries(${t} PRIVATE amn ${P_LIBS})
  # An unresolved symbol must fail at load time, not mid-run.
  target_link_options(${t} PRIVATE -Wl,-z,defs -Wl,-z,now ${AMN_COMPACT_LINK})
  install(TARGETS ${t} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/${AMN_PLUGIN_SUBDIR})
  # libamn, two levels up in the build tree and installed.
  amn_runpath(${t} ${CMAKE_INSTALL_LIBDIR}/${AMN_PLUGIN_SUBDIR} "$ORIGIN/../.." "$ORIGIN/../..")
  set_property(GLOBAL APPEND PROPERTY AMN_PLUGIN_TARGETS ${t})
endfunction()
