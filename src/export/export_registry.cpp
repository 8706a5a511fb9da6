// The primitives import_function can rebuild (tessera/export.h): each class whose body has
// TESSERA_STATE, by the key written into files (its class name). A class missing here cannot be
// imported; tests/python/test_export.py sends every registered key through a file.
//
// Not here (write_state returns false, so export refuses them): CustomTransforms (holds the
// user's functions), Compiled / CompiledReduce / CompiledRows (fused kernels and the primitives
// of their steps), the collectives of distributed/primitives.h (hold a group) and io's Load
// (holds a file reader).
#include "export/export_registry.h"

#include <stdexcept>
#include <tuple>
#include <typeinfo>
#include <utility>

#include "ops/conv.h"
#include "ops/creation.h"
#include "ops/creation_extra.h"
#include "tessera/primitives/elementwise.h"
#include "ops/fast.h"
#include "ops/factorizations.h"
#include "ops/fft.h"
#include "ops/indexing.h"
#include "ops/linalg.h"
#include "ops/quantized.h"
#include "ops/random.h"
#include "tessera/primitives/reduce.h"
#include "ops/shape.h"
#include "ops/sort.h"

namespace tessera::export_detail {

namespace {

// Registers T under `key`: its reader reads T's state() tuple and passes the fields, after the
// stream, to T's constructor.
template <class T>
void add(Registry& r, const char* key) {
  if (!r.keys.emplace(typeid(T), key).second || r.readers.count(key)) {
    throw std::logic_error(std::string("export registry: ") + key + " registered twice");
  }
  r.readers[key] = [](StateReader& reader, Stream s) {
    auto st = get<decltype(std::declval<const T&>().state())>(reader);
    return std::apply(
        [&](auto&&... f) {
          return std::shared_ptr<Primitive>(std::make_shared<T>(s, std::move(f)...));
        },
        std::move(st));
  };
}

}  // namespace

const Registry& registry() {
  static const Registry r = [] {
    Registry r;
#define TESSERA_EXPORTABLE(T) add<T>(r, #T)
    // tessera/primitives/elementwise.h
    TESSERA_EXPORTABLE(Abs);
    TESSERA_EXPORTABLE(Negative);
    TESSERA_EXPORTABLE(Sign);
    TESSERA_EXPORTABLE(Square);
    TESSERA_EXPORTABLE(Exp);
    TESSERA_EXPORTABLE(Expm1);
    TESSERA_EXPORTABLE(Log1p);
    TESSERA_EXPORTABLE(Sin);
    TESSERA_EXPORTABLE(Cos);
    TESSERA_EXPORTABLE(Tan);
    TESSERA_EXPORTABLE(ArcSin);
    TESSERA_EXPORTABLE(ArcCos);
    TESSERA_EXPORTABLE(ArcTan);
    TESSERA_EXPORTABLE(Sinh);
    TESSERA_EXPORTABLE(Cosh);
    TESSERA_EXPORTABLE(Tanh);
    TESSERA_EXPORTABLE(ArcSinh);
    TESSERA_EXPORTABLE(ArcCosh);
    TESSERA_EXPORTABLE(ArcTanh);
    TESSERA_EXPORTABLE(Sigmoid);
    TESSERA_EXPORTABLE(Erf);
    TESSERA_EXPORTABLE(ErfInv);
    TESSERA_EXPORTABLE(Floor);
    TESSERA_EXPORTABLE(Ceil);
    TESSERA_EXPORTABLE(Round);
    TESSERA_EXPORTABLE(LogicalNot);
    TESSERA_EXPORTABLE(BitwiseInvert);
    TESSERA_EXPORTABLE(StopGradient);
    TESSERA_EXPORTABLE(Conjugate);
    TESSERA_EXPORTABLE(Real);
    TESSERA_EXPORTABLE(Imag);
    TESSERA_EXPORTABLE(Add);
    TESSERA_EXPORTABLE(Subtract);
    TESSERA_EXPORTABLE(Multiply);
    TESSERA_EXPORTABLE(Divide);
    TESSERA_EXPORTABLE(Remainder);
    TESSERA_EXPORTABLE(Power);
    TESSERA_EXPORTABLE(Maximum);
    TESSERA_EXPORTABLE(Minimum);
    TESSERA_EXPORTABLE(ArcTan2);
    TESSERA_EXPORTABLE(LogAddExp);
    TESSERA_EXPORTABLE(NotEqual);
    TESSERA_EXPORTABLE(Less);
    TESSERA_EXPORTABLE(LessEqual);
    TESSERA_EXPORTABLE(Greater);
    TESSERA_EXPORTABLE(GreaterEqual);
    TESSERA_EXPORTABLE(LogicalAnd);
    TESSERA_EXPORTABLE(LogicalOr);
    TESSERA_EXPORTABLE(Select);
    TESSERA_EXPORTABLE(Sqrt);
    TESSERA_EXPORTABLE(Log);
    TESSERA_EXPORTABLE(Equal);
    TESSERA_EXPORTABLE(BitwiseBinary);
    TESSERA_EXPORTABLE(DivMod);
    // ops/conv.h
    TESSERA_EXPORTABLE(Convolution);
    TESSERA_EXPORTABLE(ConvWeightGrad);
    TESSERA_EXPORTABLE(ConvInputGrad);
    // ops/creation.h
    TESSERA_EXPORTABLE(Full);
    TESSERA_EXPORTABLE(Arange);
    TESSERA_EXPORTABLE(AsType);
    TESSERA_EXPORTABLE(Copy);
    // ops/creation_extra.h
    TESSERA_EXPORTABLE(Linspace);
    TESSERA_EXPORTABLE(Eye);
    TESSERA_EXPORTABLE(Triangular);
    TESSERA_EXPORTABLE(View);
    TESSERA_EXPORTABLE(AsStrided);
    TESSERA_EXPORTABLE(Contiguous);
    // ops/factorizations.h
    TESSERA_EXPORTABLE(QRF);
    TESSERA_EXPORTABLE(SVD);
    TESSERA_EXPORTABLE(Inverse);
    TESSERA_EXPORTABLE(Cholesky);
    TESSERA_EXPORTABLE(Eig);
    TESSERA_EXPORTABLE(Eigh);
    TESSERA_EXPORTABLE(LUF);
    TESSERA_EXPORTABLE(Solve);
    // ops/fft.h
    TESSERA_EXPORTABLE(FFT);
    TESSERA_EXPORTABLE(Hadamard);
    // ops/indexing.h
    TESSERA_EXPORTABLE(Slice);
    TESSERA_EXPORTABLE(SliceUpdate);
    TESSERA_EXPORTABLE(DynamicSlice);
    TESSERA_EXPORTABLE(DynamicSliceUpdate);
    TESSERA_EXPORTABLE(Gather);
    TESSERA_EXPORTABLE(Scatter);
    TESSERA_EXPORTABLE(GatherAxis);
    TESSERA_EXPORTABLE(ScatterAxis);
    // ops/linalg.h
    TESSERA_EXPORTABLE(Matmul);
    TESSERA_EXPORTABLE(AddMM);
    TESSERA_EXPORTABLE(GatherMM);
    TESSERA_EXPORTABLE(SegmentedMM);
    // ops/quantized.h
    TESSERA_EXPORTABLE(AffineQuantize);
    TESSERA_EXPORTABLE(AffineDequantize);
    TESSERA_EXPORTABLE(FPQuantize);
    TESSERA_EXPORTABLE(FPDequantize);
    TESSERA_EXPORTABLE(QuantizedMatmul);
    TESSERA_EXPORTABLE(GatherQMM);
    TESSERA_EXPORTABLE(ConvertFP8);
    // ops/random.h
    TESSERA_EXPORTABLE(RandomBits);
    // tessera/primitives/reduce.h
    TESSERA_EXPORTABLE(Reduce);
    TESSERA_EXPORTABLE(NumberOfElements);
    TESSERA_EXPORTABLE(ArgReduce);
    TESSERA_EXPORTABLE(Scan);
    TESSERA_EXPORTABLE(Softmax);
    TESSERA_EXPORTABLE(RoPE);
    TESSERA_EXPORTABLE(RMSNorm);
    TESSERA_EXPORTABLE(NormVjp);
    TESSERA_EXPORTABLE(LayerNorm);
    TESSERA_EXPORTABLE(CrossEntropy);
    TESSERA_EXPORTABLE(CrossEntropyGrad);
    TESSERA_EXPORTABLE(ScaledDotProductAttention);
    TESSERA_EXPORTABLE(ScaledDotProductAttentionVjp);
    TESSERA_EXPORTABLE(LogSumExp);
    // ops/shape.h
    TESSERA_EXPORTABLE(Broadcast);
    TESSERA_EXPORTABLE(Reshape);
    TESSERA_EXPORTABLE(Transpose);
    TESSERA_EXPORTABLE(ExpandDims);
    TESSERA_EXPORTABLE(Squeeze);
    TESSERA_EXPORTABLE(Concatenate);
    TESSERA_EXPORTABLE(Split);
    TESSERA_EXPORTABLE(Flip);
    TESSERA_EXPORTABLE(Pad);
    TESSERA_EXPORTABLE(Depends);
    // ops/sort.h
    TESSERA_EXPORTABLE(Sort);
    TESSERA_EXPORTABLE(ArgSort);
    TESSERA_EXPORTABLE(Partition);
    TESSERA_EXPORTABLE(ArgPartition);
    TESSERA_EXPORTABLE(SearchSorted);
    // ops/transform_primitives.h
    // tessera/primitives/compiled.h
#undef TESSERA_EXPORTABLE
    return r;
  }();
  return r;
}

}  // namespace tessera::export_detail
