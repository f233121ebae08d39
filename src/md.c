#include "kernel_common.h"
int main(int argc, char **argv) { (void)argc; (void)argv; return 1; }
