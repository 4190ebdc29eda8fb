/* Symbols at one address, for the symbolizer's choice between them
 * (test_symbolize's test_symbol_order). Built without debug information
 * (test/CMakeLists.txt), so the ELF symbol table is all that names this
 * code: .symtab lists local symbols before global ones, and at each
 * address below the local one is listed first.
 *   symorder_pair: a local sized function and a global alias of it; the
 *     global name is the one a profile shows (as perf and addr2line -f
 *     give it).
 *   symorder_after: a sizeless local label at the start of a global sized
 *     function; the function is named. */
__asm__(".text\n"
        ".p2align 4\n"
        ".type symorder_local, @function\n"
        "symorder_local:\n"
        ".globl symorder_pair\n"
        ".type symorder_pair, @function\n"
        "symorder_pair:\n"
        "  xorl %eax, %eax\n"
        "  nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n"
        "  ret\n"
        ".size symorder_local, .-symorder_local\n"
        ".size symorder_pair, .-symorder_pair\n"
        ".p2align 4\n"
        "symorder_label:\n"
        ".globl symorder_after\n"
        ".type symorder_after, @function\n"
        "symorder_after:\n"
        "  movl $1, %eax\n"
        "  nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n"
        "  ret\n"
        ".size symorder_after, .-symorder_after\n");
