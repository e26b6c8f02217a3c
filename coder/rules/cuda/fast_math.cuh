#define KS_EXP __expf
#define KS_DIV(a, b) __fdividef((a), (b))
