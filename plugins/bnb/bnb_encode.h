/* The bnb encoder (forget --to bnb-nf4 | bnb-nf4-dq | bnb-fp4 | bnb-fp4-dq | bnb-int8). */
#ifndef AMN_BNB_ENCODE_H
#define AMN_BNB_ENCODE_H

#include "amn/scheme.h"

extern const amn_encoder bnb_encoder;

#endif
