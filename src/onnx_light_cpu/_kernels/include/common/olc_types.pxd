# The element types of the cores (olc_types.h): TensorProto's numbers.

cdef extern from "common/olc_types.h" nogil:
    int OLC_FLOAT, OLC_UINT8, OLC_INT8, OLC_UINT16, OLC_INT16, OLC_INT32, OLC_INT64
    int OLC_BOOL, OLC_FLOAT16, OLC_DOUBLE, OLC_UINT32, OLC_UINT64, OLC_BFLOAT16
