// Links against an installed Tessera and checks one computed value (sum of 0..9 = 45).
#include <tessera/tessera.h>

#include <cstdio>

int main() {
  namespace mx = tessera;
  auto s = mx::sum(mx::arange(0, 10));
  int v = s.item<int>();
  std::printf("sum(arange(10)) = %d\n", v);
  return v == 45 ? 0 : 1;
}
