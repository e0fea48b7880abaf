"""Cores shared by several operator families: the attention and rotary
engines, the float GEMM, the u8 x s8 integer GEMM and the element-wise
activations (BiasGelu, SwiGLU)."""
