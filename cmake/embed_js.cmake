# Turn a script or a style sheet into a C string: const char VAR[] (the
# HTML pages carry their chart code inside, so each page is one file that
# works offline). A source-map comment is dropped: the map is not in the
# page, and a browser's developer tools would report it missing.
file(READ ${IN} text)
string(REGEX REPLACE "\n?(//|/\\*)# sourceMappingURL=[^\n]*" "" text "${text}")
string(TOLOWER "${text}" lower)
if(lower MATCHES "</(script|style)")
  message(FATAL_ERROR "${IN} holds a closing script or style tag: it cannot be inlined in a page")
endif()
string(HEX "${text}" hex)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "/* generated from ${IN} */\nconst char ${VAR}[] = {${bytes} 0x00};\n")
