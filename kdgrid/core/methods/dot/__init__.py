"""DOT (Zhao, Song & Qiu, ICCV 2023): SGD with separate task and distillation momenta; and its Adam form,
kdgrid's own extension (``optimizer: dot_adam``)."""
