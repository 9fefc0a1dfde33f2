# Turn a Markdown page into a C string: const char vl_help_<NAME>[].
file(READ ${IN} text HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${text}")
file(WRITE ${OUT} "/* generated from ${IN} */\nconst char vl_help_${NAME}[] = {${bytes} 0x00};\n")
