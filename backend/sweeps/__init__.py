"""Sweeps: experiments that run one simulation per point of a grid over config fields."""
