# Turn a text file into a C array (build time): cmake -DIN=f -DOUT=f.c -DSYM=name -P embed.cmake
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
file(WRITE ${OUT} "/* generated from ${IN} by embed.cmake; do not edit */\n#include <stddef.h>\nconst char ${SYM}[] = {\n${hex}0x00};\nconst size_t ${SYM}_len = sizeof ${SYM} - 1;\n")
