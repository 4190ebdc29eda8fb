# Turns the viewer page (IN, src/ui/index.html) into a C header (OUT) that
# defines it as a byte array, so the library and the cprof tool carry the
# same page without reading any file at run time. Run at build time:
#   cmake -DIN=index.html -DOUT=cprof_ui_page.h -P embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR len "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp"
  "/* Generated from src/ui/index.html by src/ui/embed.cmake; do not edit. */\n"
  "#define CPROF_UI_PAGE_LEN ${len}\n"
  "static const unsigned char cprof_ui_page[CPROF_UI_PAGE_LEN + 1] = {\n"
  "${bytes}0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
