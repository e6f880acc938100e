"""A stub of diffusers for verify's real-script runs: ``AutoencoderKL.from_pretrained``
without a download, a 1x1-convolution "VAE" with random weights (seeded) whose
``encode(x).latent_dist.sample()`` draws from a diagonal Gaussian as the real one does.
It keeps the image's height and width: the bench feeds 32x32 "images" that stand for
256x256 ones after the VAE's 8x reduction."""
