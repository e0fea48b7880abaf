/* The element types of the cores, numbered as onnx.TensorProto numbers
 * them, so that an adapter passes TensorProto codes straight through. */
#ifndef OLC_TYPES_H
#define OLC_TYPES_H

enum {
    OLC_FLOAT = 1, OLC_UINT8 = 2, OLC_INT8 = 3, OLC_UINT16 = 4, OLC_INT16 = 5,
    OLC_INT32 = 6, OLC_INT64 = 7, OLC_STRING = 8, OLC_BOOL = 9, OLC_FLOAT16 = 10,
    OLC_DOUBLE = 11, OLC_UINT32 = 12, OLC_UINT64 = 13, OLC_COMPLEX64 = 14,
    OLC_COMPLEX128 = 15, OLC_BFLOAT16 = 16, OLC_FLOAT8E4M3FN = 17,
    OLC_FLOAT8E4M3FNUZ = 18, OLC_FLOAT8E5M2 = 19, OLC_FLOAT8E5M2FNUZ = 20,
    OLC_UINT4 = 21, OLC_INT4 = 22, OLC_FLOAT4E2M1 = 23, OLC_FLOAT8E8M0 = 24
};

#endif
