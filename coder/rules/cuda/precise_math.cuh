#define KS_EXP expf
#define KS_DIV(a, b) ((a) / (b))
