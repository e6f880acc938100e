"""A stub of timm for verify's real-script runs: the three ViT building blocks that
facebookresearch/DiT imports (timm needs torchvision, which is not installed here).
Written for this bench after timm's documented signatures; the computation is the
textbook one (patchify by a strided convolution, multi-head self-attention, a 2-layer MLP)."""
