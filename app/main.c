/* main.c — placeholder until the subcommands land. */
#include <stdio.h>
#include "hx.h"
int main(void) { printf("hx %s\n", hx_version()); return 0; }
