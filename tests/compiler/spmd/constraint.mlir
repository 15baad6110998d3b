module @jit_constraint attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> (tensor<16x64xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"x"}]> : tensor<16x64xf32>
    %2 = stablehlo.tanh %1 : tensor<16x64xf32>
    return %2 : tensor<16x64xf32>
  }
}
