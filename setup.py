import os
import sys

from setuptools import find_packages, setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_hooks import cmdclass, read_version  # noqa: E402

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")) as readme:
    long_description = readme.read()

setup(
    name="pycumsum_op",
    version=read_version(),
    description="torch.cumsum for Caffe2 nets: a Python operator with gradients, and a doctor for "
                "'Gradient of output ... is sparse (expected dense)'",
    long_description=long_description,
    long_description_content_type="text/markdown",
    packages=find_packages(include=["pycumsum_op", "pycumsum_op.*"]),
    python_requires=">=3.6,<3.10",
    # No bare torch requirement: installing into a training environment must keep its Caffe2 build.
    install_requires=["numpy>=1.19,<1.24", "protobuf>=3.12,<4", "six", "future", "typing-extensions"],
    extras_require={
        # torch 1.10.2 imports pkg_resources: setuptools 82 removed it, 80.9+ warns on every import.
        # data_parallel_model imports memonger, which needs networkx (not a torch dependency); 2.8.8 needs 3.8+.
        "caffe2": ["torch==1.10.2", "setuptools<80", "networkx==2.8.8; python_version >= '3.8'",
                   "networkx==2.5.1; python_version < '3.8'"],
        "onnx": ["onnx==1.10.2"],
    },
    entry_points={"console_scripts": ["pycumsum-op=pycumsum_op.cli:main"]},
    cmdclass=cmdclass,
    classifiers=[
        "Programming Language :: Python :: 3.6",
        "Programming Language :: Python :: 3.7",
        "Programming Language :: Python :: 3.8",
        "Programming Language :: Python :: 3.9",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
