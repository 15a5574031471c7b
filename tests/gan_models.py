"""A DCGAN (Radford et al.), written once for any torch-style namespace (torch or lazytorch): the
generator upsamples by transposed convolutions of stride 2 with BatchNorm and ReLU, the
discriminator downsamples by strided convolutions with LeakyReLU; and its training step.  Used by
tests/test_training.py and benchmarks/conv_models.py."""
from __future__ import annotations

import math


def dcgan(nn, nz: int = 100, nf: int = 64, size: int = 64):
    """(generator, discriminator) for `size` x `size` RGB images (a power of two, >= 16)."""
    steps = int(math.log2(size)) - 3                 # the stride-2 layers between the 4 x 4 and the image
    g = [nn.ConvTranspose2d(nz, nf << steps, 4, 1, 0, bias=False), nn.BatchNorm2d(nf << steps), nn.ReLU(True)]
    for i in reversed(range(steps)):
        g += [nn.ConvTranspose2d(nf << (i + 1), nf << i, 4, 2, 1, bias=False), nn.BatchNorm2d(nf << i), nn.ReLU(True)]
    g += [nn.ConvTranspose2d(nf, 3, 4, 2, 1, bias=False), nn.Tanh()]
    d = [nn.Conv2d(3, nf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
    for i in range(steps):
        d += [nn.Conv2d(nf << i, nf << (i + 1), 4, 2, 1, bias=False), nn.BatchNorm2d(nf << (i + 1)),
              nn.LeakyReLU(0.2, inplace=True)]
    d += [nn.Conv2d(nf << steps, 1, 4, 1, 0, bias=False), nn.Sigmoid()]
    return nn.Sequential(*g), nn.Sequential(*d)


def gan_step(lib, g, d, opt_g, opt_d, real, noise):
    """One step: the discriminator on real and detached fake images, then the generator through
    it (binary cross-entropy); returns (discriminator loss, generator loss)."""
    bce = lib.nn.functional.binary_cross_entropy
    d.zero_grad()
    fake = g(noise)
    out = d(real).view(-1)
    err_d = bce(out, lib.ones_like(out)) + bce(d(fake.detach()).view(-1), lib.zeros_like(out))
    err_d.backward()
    opt_d.step()
    g.zero_grad()
    out = d(fake).view(-1)
    err_g = bce(out, lib.ones_like(out))
    err_g.backward()
    opt_g.step()
    return err_d, err_g
