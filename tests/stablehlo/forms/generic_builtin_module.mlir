// The generic form StableHLO's testdata also uses: "builtin.module", "func.func" with function_type and
// sym_name properties, "func.call" with a callee, results %r:2 used as %r#k. max(x * y, 0) of two inputs.
"builtin.module"() <{sym_name = "jit_main"}> ({
  "func.func"() <{function_type = () -> tensor<2x4xf32>, res_attrs = [{jax.result_info = "", mhlo.layout_mode = "default"}], sym_name = "main", sym_visibility = "public"}> ({
    %0:2 = "func.call"() <{callee = @inputs}> : () -> (tensor<2x4xf32>, tensor<2x4xf32>)
    %1 = "func.call"() <{callee = @expected}> : () -> tensor<2x4xf32>
    %2 = "stablehlo.multiply"(%0#0, %0#1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<2x4xf32>}> : () -> tensor<2x4xf32>
    %4 = "stablehlo.maximum"(%2, %3) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    "stablehlo.custom_call"(%4, %1) <{call_target_name = "check.expect_close", has_side_effect = true}> : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
    "func.return"(%4) : (tensor<2x4xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = () -> (tensor<2x4xf32>, tensor<2x4xf32>), sym_name = "inputs", sym_visibility = "private"}> ({
    %0 = "stablehlo.constant"() <{value = dense<[[1.5, -2.0, 3.25, 0.5], [-1.0, 4.0, -0.25, 2.0]]> : tensor<2x4xf32>}> : () -> tensor<2x4xf32>
    %1 = "stablehlo.constant"() <{value = dense<[[2.0, 3.0, -1.0, 8.0], [-3.0, 0.5, -4.0, 0.0]]> : tensor<2x4xf32>}> : () -> tensor<2x4xf32>
    "func.return"(%0, %1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = () -> tensor<2x4xf32>, sym_name = "expected", sym_visibility = "private"}> ({
    %0 = "stablehlo.constant"() <{value = dense<[[3.0, 0.0, 0.0, 4.0], [3.0, 2.0, 1.0, 0.0]]> : tensor<2x4xf32>}> : () -> tensor<2x4xf32>
    "func.return"(%0) : (tensor<2x4xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
