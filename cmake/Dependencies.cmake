# Finds every dependency the standard way. Each is a Debian 12 package (README lists them).

find_package(PkgConfig REQUIRED)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing>=2.1)

find_package(Boost 1.74 REQUIRED)  # headers only: Interprocess, Lockfree
find_package(doctest REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 2.1 REQUIRED)
find_package(Threads REQUIRED)

# libnuma ships no CMake or pkg-config file on Debian 12.
find_path(NUMA_INCLUDE_DIR numaif.h REQUIRED)
find_library(NUMA_LIBRARY numa REQUIRED)
add_library(hugepin::numa UNKNOWN IMPORTED)
set_target_properties(hugepin::numa PROPERTIES IMPORTED_LOCATION ${NUMA_LIBRARY}
                                               INTERFACE_INCLUDE_DIRECTORIES ${NUMA_INCLUDE_DIR})

# CUDA is optional: when a compiler is found (nvcc at /usr/local/cuda on the build machines) the
# CUDA code is built for Hopper (sm_90); without one everything else still builds and tests.
set(HUGEPIN_HAVE_CUDA OFF)
if(HUGEPIN_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper (sm_90) unless the user chose (-DCMAKE_CUDA_ARCHITECTURES=...): set before
    # enable_language, which would otherwise pick the compiler's default.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 knows no C++20 dialect flag for nvcc (nvcc 12 and later take -std=c++20).
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(HUGEPIN_HAVE_CUDA ON)
  endif()
endif()
