/* GTKWave's FST writer, as Verilator ships it (/usr/share/verilator/include/
   gtkwave): one translation unit, built only when that copy and zlib exist
   (sim/CMakeLists.txt). Third-party code, compiled without our warnings. */
#define FST_CONFIG_INCLUDE "fst_config.h"
#include "fastlz.c"
#include "lz4.c"
#include "fstapi.c"
