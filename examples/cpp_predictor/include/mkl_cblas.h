// The enums of MKL's mkl_cblas.h, nothing else. The torch wheel's caffe2/core/macros.h defines
// CAFFE2_USE_MKL, so caffe2/utils/cblas.h includes <mkl_cblas.h>, which the wheel does not ship;
// the headers a predictor includes need only these enums (libtorch_cpu.so holds MKL itself).
#pragma once
#ifndef CBLAS_ENUM_DEFINED_H
#define CBLAS_ENUM_DEFINED_H
typedef enum { CblasRowMajor = 101, CblasColMajor = 102 } CBLAS_LAYOUT;
typedef CBLAS_LAYOUT CBLAS_ORDER;
typedef enum { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 } CBLAS_TRANSPOSE;
typedef enum { CblasUpper = 121, CblasLower = 122 } CBLAS_UPLO;
typedef enum { CblasNonUnit = 131, CblasUnit = 132 } CBLAS_DIAG;
typedef enum { CblasLeft = 141, CblasRight = 142 } CBLAS_SIDE;
#endif
