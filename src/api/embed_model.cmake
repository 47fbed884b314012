# Turns the model JSON into a C++ source file holding it as a string.
file(READ ${INPUT} CONTENT)
file(WRITE ${OUTPUT} "// Generated from ${INPUT}. Do not edit.\nnamespace hpod::api {\nextern const char ${VAR}[];\nconst char ${VAR}[] = R\"HPODMODEL(${CONTENT})HPODMODEL\";\n}  // namespace hpod::api\n")
