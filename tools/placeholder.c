/* Keeps cnnc_lib non-empty until passes/ and codegen/ have sources. */
int cnnc_placeholder_unused;
