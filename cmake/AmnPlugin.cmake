# amn_add_plugin(<name> SOURCES src... [AVX2_SOURCES src...] [AVX512_SOURCES src...]
#                [LIBS lib...])
# Builds amn-<name>.so, a module exporting one symbol, into the build tree's
# plugin directory, and installs it to ${libdir}/amn/plugins.
set(AMN_SIMD_AVX2_FLAGS -mavx2 -mf16c -mbmi2)
set(AMN_SIMD_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mf16c -mbmi2)
# The header that turns AVX-512 intrinsics into SIMDe's portable code (tests
# only: amn_simd_sources(... EMULATE_AVX512)).
set(AMN_AVX512_EMULATE_HEADER ${PROJECT_SOURCE_DIR}/tests/common/avx512_emulate.h)

# x86 intrinsics sources exist only in x86-64 builds; elsewhere the scalar
# kernels are all there is (AMN_SIMD_X86 in amn/simd.h).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(AMN_SIMD_X86 ON)
else()
  set(AMN_SIMD_X86 OFF)
endif()

# amn_simd_sources(<target> [AVX2 src...] [AVX512 src...] [EMULATE_AVX512])
# Adds sources compiled for one vector level to <target>. Each level is an
# object library of its own (<target>-avx2, <target>-avx512) with the
# level's flags as target options, never source-file properties: those are
# per directory, so two targets of one directory compiling the same file at
# two levels would share one set of flags. The object libraries compile with
# <target>'s include directories, definitions and options (read at generate
# time). EMULATE_AVX512 builds the AVX-512 sources at the AVX2 level against
# SIMDe's portable AVX-512 (force-included), so they run on any AVX2 CPU.
# The names of the object libraries made go to <target>_SIMD_OBJECTS in the
# caller's scope.
function(amn_simd_sources target)
  cmake_parse_arguments(S "EMULATE_AVX512" "" "AVX2;AVX512" ${ARGN})
  set(objs)
  set(${target}_SIMD_OBJECTS "" PARENT_SCOPE)
  if(NOT AMN_SIMD_X86)
    return()
  endif()
  foreach(level AVX2 AVX512)
    if(NOT S_${level})
      continue()
    endif()
    string(TOLOWER ${level} lower)
    set(obj ${target}-${lower})
    add_library(${obj} OBJECT ${S_${level}})
    set(flags ${AMN_SIMD_${level}_FLAGS})
    if(level STREQUAL "AVX512" AND S_EMULATE_AVX512)
      if(NOT AMN_SIMDE_INCLUDE_DIR)
        message(FATAL_ERROR "EMULATE_AVX512 needs SIMDe (libsimde-dev)")
      endif()
      # SIMDe passes 64-byte vectors by value, which gcc notes as an ABI change.
      # Not under AddressSanitizer: unoptimized, its redzones around SIMDe's
      # 64-byte temporaries make stack frames of megabytes (the callers and
      # UBSan still check these files).
      set(flags ${AMN_SIMD_AVX2_FLAGS} -Wno-psabi -fno-sanitize=address
          -include ${AMN_AVX512_EMULATE_HEADER})
      target_include_directories(${obj} SYSTEM PRIVATE ${AMN_SIMDE_INCLUDE_DIR})
    endif()
    target_compile_options(${obj} PRIVATE $<TARGET_PROPERTY:${target},COMPILE_OPTIONS> ${flags})
    target_include_directories(${obj} PRIVATE $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>)
    target_compile_definitions(${obj} PRIVATE $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>)
    # Vector kernels are internal to whatever links them.
    set_target_properties(${obj} PROPERTIES C_VISIBILITY_PRESET hidden)
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "OBJECT_LIBRARY") # an object library's caller links them (below)
      target_sources(${target} PRIVATE $<TARGET_OBJECTS:${obj}>)
    endif()
    list(APPEND objs ${obj})
  endforeach()
  set(${target}_SIMD_OBJECTS ${objs} PARENT_SCOPE)
endfunction()

function(amn_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;AVX2_SOURCES;AVX512_SOURCES;LIBS" ${ARGN})
  set(t amn-plugin-${name})
  if(AMN_STATIC_PLUGINS)
    # Built into libamn: the descriptor becomes amn_<name>_LTX_amn_plugin_v2
    # (AMN_PLUGIN_BUILTIN), listed in the table the top CMakeLists generates.
    add_library(${t} OBJECT ${P_SOURCES})
    amn_simd_sources(${t} AVX2 ${P_AVX2_SOURCES} AVX512 ${P_AVX512_SOURCES})
    # An object library's own objects are all that reach libamn through it.
    foreach(o IN LISTS ${t}_SIMD_OBJECTS)
      target_link_libraries(amn PRIVATE ${o})
    endforeach()
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
