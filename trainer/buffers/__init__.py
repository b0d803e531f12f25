"""buffers"""
