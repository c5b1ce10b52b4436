/* npz_scan.h — `amn scan` of .npz / .npy (object arrays, ZIP anomalies). */
#ifndef AMN_NPZ_SCAN_H
#define AMN_NPZ_SCAN_H

#include "amn/scan.h"

int npz_scan(const amn_scan_args *a, amn_scan_report *r, amn_error *err);

#endif
