/* Internal to the model plans: the plan of a Hugging Face diffusers transformer config (an image
 * or video generator, read by its _class_name) at the pixel size of pe_plan_opts (diffusers.c). */
#ifndef PE_PLAN_DIFFUSERS_H
#define PE_PLAN_DIFFUSERS_H

#include "plan/cfg.h"

/* Is root a diffusers transformer config (a _class_name and no model_type)? */
int plan_is_generator(const json_t *root);
/* Its encodings at o's height, width and frames: 0, or an error in c->err (PE_EINVAL naming
 * height / width / frames for a size the model cannot take, PE_EUNPROCESSABLE naming the key). */
int plan_generator(struct cfg *c);

#endif
