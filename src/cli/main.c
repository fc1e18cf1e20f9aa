/* diffattn: the command-line tool. Each subcommand lives in its own file. */
#include <stdio.h>
#include <string.h>

#include "diffattn.h"

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("diffattn %s\n", DA_VERSION);
    return 0;
}
