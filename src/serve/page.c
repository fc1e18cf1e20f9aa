/* GET /: the chat page, src/serve/chat_page.html, compiled into the binary
 * as it is (a NUL-terminated string), so the page stays one readable file
 * with no build step and the server reads no file at run time. CMake passes
 * the file's path as DA_CHAT_PAGE_PATH and rebuilds this file when the page
 * changes. */
#include "serve/server.h"

#ifndef DA_CHAT_PAGE_PATH
#error "DA_CHAT_PAGE_PATH: the path of src/serve/chat_page.html (set by CMakeLists.txt)"
#endif

__asm__(".section .rodata\n"
        ".global srv_chat_page\n"
        ".type srv_chat_page, @object\n"
        ".balign 16\n"
        "srv_chat_page:\n"
        ".incbin \"" DA_CHAT_PAGE_PATH "\"\n"
        ".byte 0\n"
        ".size srv_chat_page, . - srv_chat_page\n"
        ".previous\n");
