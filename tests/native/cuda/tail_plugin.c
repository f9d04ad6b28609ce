/* A plugin whose wrapper ends in a tail call (issue 27, review: "tail call"): tail_props jumps
 * to cudaGetDeviceProperties through the PLT, as `return cudaGetDeviceProperties(p, 0);`
 * compiles at -O2, so the runtime's return address is the plugin's caller's. Written in
 * assembly so that the jump is there whatever the compiler flags (the sanitizer build included).
 * Linked against libcudart.so.11.0: its reference is cudaGetDeviceProperties@libcudart.so.11.0. */
__asm__(".text\n"
        ".globl tail_props\n"
        ".type tail_props, @function\n"
        "tail_props:\n"
#if defined(__x86_64__)
        "    xorl %esi, %esi\n"
        "    jmp cudaGetDeviceProperties@PLT\n"
#elif defined(__aarch64__)
        "    mov w1, #0\n"
        "    b cudaGetDeviceProperties\n"
#else
#error "tail_plugin.c: x86_64 or aarch64"
#endif
        ".size tail_props, .-tail_props\n");
