/* The program each layer of the library is linked into whole (every
 * object of its archive, CMakeLists.txt "vl_layer_"), with only the layers
 * below it: a call up a layer is an undefined reference, and the build
 * stops there. It runs nothing. */
int main(void) { return 0; }
